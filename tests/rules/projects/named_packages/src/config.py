import os

model_name = os.environ.get("MODEL_NAME", "NRMS")


class NRMSConfig:
    dim = 256
    heads = 16
    learning_rate = 1e-4


class LSTURConfig:
    dim = 256
    learning_rate = 1e-4
