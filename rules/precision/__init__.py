"""Precision and compilation rules (GP3xx): autocast, TF32, torch.compile, cuDNN benchmark,
fused optimizers, with the helpers only they use."""
