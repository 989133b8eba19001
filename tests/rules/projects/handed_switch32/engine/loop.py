def run_epoch(model, stepper, loader, use_bf16):
    model.train()
    total = 0.0
    for images, masks in loader:
        images = images.cuda(non_blocking=True)
        masks = masks.cuda(non_blocking=True)
        total += stepper.step(images, masks, use_bf16)
    return total
