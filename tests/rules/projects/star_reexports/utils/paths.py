import os


def results_dir():
    return os.path.join(os.path.dirname(__file__), "..", "results")
