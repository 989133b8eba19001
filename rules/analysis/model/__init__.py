"""Layer 2, the training model: step and eval loops, what runs on every step, what names hold
(optimizers, loaders, models, criteria), tensors versus host values. Imports only ``syntax``."""
