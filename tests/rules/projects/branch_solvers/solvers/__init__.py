def make_solver(opt):
    if opt["solver"] == "plain":
        from solvers.plain import PlainSolver as Solver
    elif opt["solver"] == "adversarial":
        from solvers.adversarial import AdversarialSolver as Solver
    else:
        raise ValueError(opt["solver"])
    return Solver(opt)
