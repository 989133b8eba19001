from .classify import Classification
from .retrieve import Retrieval

PROBLEMS = {"classify": Classification, "retrieve": Retrieval}


def get_problem(args):
    return PROBLEMS[args.problem](args)
