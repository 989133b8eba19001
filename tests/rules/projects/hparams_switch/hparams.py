from types import SimpleNamespace


class HParams(SimpleNamespace):
    def parse(self, overrides):
        for item in filter(None, overrides.split(",")):
            key, value = item.split("=")
            setattr(self, key, type(getattr(self, key))(value))
        return self


def create_hparams(overrides=None):
    hparams = HParams(
        epochs=500,
        fp16_run=False,
        batch_size=32,
        n_mel_channels=80,
        learning_rate=1e-3,
    )
    if overrides:
        hparams.parse(overrides)
    return hparams
