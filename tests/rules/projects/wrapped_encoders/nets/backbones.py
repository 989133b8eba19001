import torchvision


def get_backbone(name, pretrained=False):
    backbones = {
        "resnet18": torchvision.models.resnet18(weights=None),
        "resnet50": torchvision.models.resnet50(weights="DEFAULT" if pretrained else None),
    }
    if name not in backbones:
        raise KeyError(f"unknown backbone {name}")
    return backbones[name]
