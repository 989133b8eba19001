"""What the per-step rules (GP101, GP103, GP105) follow into other modules: one text for their
documentation pages, since they share the mechanism (``lint/step_callers.py``)."""

PER_STEP_ACROSS_MODULES = (
    "Per-step code whose loop is in another module of the project is followed back: a function "
    "or method of this module that another module's step or eval loop calls on every iteration "
    "(`to_device(batch, device)`, a loss object `criterion(out, y)` reaching its `forward`/"
    "`__call__`, `model.parse_batch(batch)`, a trainer's `train_step(samples)` that runs one optimizer "
    "step, which also makes the caller's loop a training loop; also an `nn.Module` trainer), the closure a "
    "function of this module returns when the caller calls its result every step (`step_fn = "
    "losses.get_step_fn(model, opt)`, one of a returned tuple, one returned through `functools.partial`), "
    "a function the caller wraps in `functools.partial`/`torch.compile`, and a subclass's method that a "
    "base class of another module calls as `self.training_step(batch)` in its loop (template-method "
    "trainers), directly or through a package `__init__` that "
    "re-exports it, and this module's functions it calls, are per-step code; the finding is "
    "here, where the edit goes, and names the caller's line. Only the direct importers of this "
    "module are read (their facts, bounded), not callers of callers."
)
