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
    "module are read (their facts, bounded), not callers of callers. "
    "A model's `forward` counts as such a loop: the functions and classes of this module that the "
    "`forward` of an `nn.Module` of another module calls (`mask = ProbMask(B, H, L, index)` building "
    "its `__init__`, `emb = timestep_embedding(t, dim)` of an `ops.py`/`nn.py` helper module) run on "
    "every call of that model."
)

# What GP101/GP105 (and GP104, GP103 through the same callers) treat as a model's per-call code.
PER_FORWARD = (
    "A model's forward is per-step code wherever it is written: the `forward` (or `__call__`) of an "
    "`nn.Module` subclass of the file (also one deriving from a model class of the user's other modules) runs "
    "on every call of the module, whether or not the file holds a loop (model code in `models/*.py`, built "
    "by a registry or `importlib` in the entry), and so do the functions and methods of the file it calls "
    "and the `__init__` of the classes it constructs on every call (`ProbMask(...)`). Not per step: "
    "`__init__` and other methods no forward reaches, buffers built at construction, modules used as data "
    "transforms (an instance inside `Compose([...])` or handed as `transform=`: they run in the loader on "
    "the host), the body of an `if` that fills a cache the module keeps (`if self.grid is None or "
    "self.grid.shape != x.shape: self.grid = ...`, `if key not in self.cache:`) and functions called only "
    "there, and host reads of a value the forward was handed unchanged (`int(lengths.max())`: where the "
    "caller keeps `lengths` is its choice). CPU-only programs are not checked. A CPU index tensor used to "
    "index a device tensor (`x[torch.arange(B)[:, None], idx]`, an implicit copy on every call) is not "
    "reported: which tensor is on the device is not known soundly from the forward alone."
)
