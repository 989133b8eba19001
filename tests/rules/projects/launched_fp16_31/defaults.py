import argparse


def add_dict_to_argparser(parser, defaults):
    for key, value in defaults.items():
        kind = (lambda s: s.lower() in ("true", "1", "yes")) if isinstance(value, bool) else type(value)
        parser.add_argument(f"--{key}", default=value, type=kind)


def create_argparser():
    defaults = dict(data_dir="", lr=1e-4, batch_size=64, use_fp16=False, channels=128)
    parser = argparse.ArgumentParser()
    add_dict_to_argparser(parser, defaults)
    return parser
