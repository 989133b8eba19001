import argparse
import json


class HParams(dict):
    def __getattr__(self, key):
        value = self[key]
        return HParams(value) if isinstance(value, dict) else value


def get_hparams():
    parser = argparse.ArgumentParser()
    parser.add_argument("-c", "--config", default="configs/base.json")
    args = parser.parse_args()
    with open(args.config) as f:
        return HParams(json.load(f))
