import argparse


def config_parser():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model_name", type=str, default="GridMLP", choices=["GridMLP", "PlaneMLP"])
    parser.add_argument("--lr", type=float, default=2e-2)
    parser.add_argument("--n_iters", type=int, default=30000)
    return parser.parse_args()
