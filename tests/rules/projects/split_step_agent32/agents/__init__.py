import importlib


def make_agent(opt):
    module = importlib.import_module("agents." + opt.agent + "_agent")
    cls = [v for k, v in vars(module).items() if k.lower() == opt.agent + "agent"][0]
    return cls(opt)
