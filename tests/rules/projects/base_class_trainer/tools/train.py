import argparse

import torch
import yaml


def main(cfg):
    from engine.runner import SegRunner
    from nets import build_net

    loader = torch.utils.data.DataLoader(load_set(cfg), batch_size=8, shuffle=True, num_workers=4,
                                         pin_memory=True, persistent_workers=True)
    net = build_net(cfg["net"])
    decoder = make_decoder(cfg)
    runner = SegRunner(cfg, net=net, loss_fn=torch.nn.CrossEntropyLoss(), loader=loader, decode=decoder)
    runner.run()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="configs/seg.yaml")
    with open(parser.parse_args().config) as f:
        main(yaml.safe_load(f))
