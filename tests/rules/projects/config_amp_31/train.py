import torch
from torch.cuda.amp import GradScaler, autocast
from torch.utils.data import DataLoader

import utils
from models import SynthesizerTrn
from data import AudioDataset


def main():
    hps = utils.get_hparams()
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    net = SynthesizerTrn(**hps.model).cuda()
    net.compile()
    optim = torch.optim.AdamW(net.parameters(), hps.train.learning_rate, fused=True)
    scaler = GradScaler(enabled=hps.train.fp16_run)
    half_type = torch.bfloat16 if hps.train.half_type == "bf16" else torch.float16
    loader = DataLoader(AudioDataset("filelists/train.txt"), batch_size=hps.train.batch_size, num_workers=4,
                        pin_memory=True, persistent_workers=True)
    for epoch in range(1000):
        for spec, wav in loader:
            spec, wav = spec.cuda(non_blocking=True), wav.cuda(non_blocking=True)
            with autocast(enabled=hps.train.fp16_run, dtype=half_type):
                loss = net(spec, wav)
            optim.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optim)
            scaler.update()


if __name__ == "__main__":
    main()
