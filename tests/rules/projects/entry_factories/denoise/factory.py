from .unet import TinyUNet


class NoiseSchedule:
    def __init__(self, steps):
        self.steps = steps


def unet_defaults():
    return dict(channels=3, width=64, steps=1000)


def create_unet(channels, width):
    return TinyUNet(channels, width)


def create_unet_and_schedule(channels, width, steps):
    unet = create_unet(channels, width)
    schedule = NoiseSchedule(steps)
    return unet, schedule
