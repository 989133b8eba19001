import json

import torch
from torch.utils import data


class AudioDataset(data.Dataset):
    def __init__(self, json_path):
        with open(json_path) as f:
            self.items = sorted(json.load(f).items())

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        feats = torch.load(self.items[i][1]["feat"])
        return feats, torch.tensor(self.items[i][1]["tokens"])


class AudioDataLoader(data.DataLoader):
    def __init__(self, *args, LFR_m=1, LFR_n=1, **kwargs):
        super().__init__(*args, **kwargs)
        self.LFR_m, self.LFR_n = LFR_m, LFR_n
