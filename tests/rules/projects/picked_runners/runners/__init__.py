from .supervised import SupervisedRunner
from .distill import DistillRunner

RUNNERS = {"supervised": SupervisedRunner, "distill": DistillRunner}


def build_runner(args, net, loader):
    runner_cls = RUNNERS.get(args.kind)
    return runner_cls(args, net, loader)
