"""The entry: the algorithm class is picked by name at run time, so no import names it."""
from data import create_dataset
from engine import run_epoch
from models import create_model


def main():
    loader = create_dataset(batch_size=16)
    algo = create_model("gan")
    for epoch in range(100):
        run_epoch(algo, loader)


if __name__ == "__main__":
    main()
