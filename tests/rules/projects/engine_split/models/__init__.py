from .resnet import resnet18, resnet34


def build_model(arch, num_classes):
    return globals()[arch](num_classes=num_classes)
