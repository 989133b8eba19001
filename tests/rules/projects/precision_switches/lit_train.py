"""Lightning 1.x: amp_backend/amp_level configure apex, but without precision=16 the Trainer
trains in float32."""
from pytorch_lightning import Trainer

from lit_model import Denoiser


def train(hparams):
    model = Denoiser(hparams)
    trainer = Trainer(
        gpus=hparams.gpus,
        amp_backend="apex",
        amp_level="O2",
        max_epochs=1000,
        benchmark=True,
    )
    trainer.fit(model)


if __name__ == "__main__":
    train(None)
