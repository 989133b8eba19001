"""Memory rules (GP4xx): gradients and graphs kept alive, eval without no_grad, activation
checkpointing."""
