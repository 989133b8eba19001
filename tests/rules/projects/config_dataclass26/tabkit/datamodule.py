import torch
from torch.utils.data import DataLoader, Dataset

from tabkit import LoaderSettings


class RowDataset(Dataset):
    def __init__(self, table, target):
        self.table = table
        self.target = target

    def __len__(self):
        return len(self.table)

    def __getitem__(self, idx):
        record = self.table.iloc[idx]
        return {"features": torch.as_tensor(record.drop(self.target).to_numpy()),
                "label": torch.as_tensor(record[self.target])}


class TableData:
    def __init__(self, table, settings: LoaderSettings, target="y"):
        self.settings = settings
        self.rows = RowDataset(table, target)

    def training_loader(self):
        # the keyword is written in the call: ``**loader_kwargs`` cannot also hold it
        return DataLoader(self.rows, self.settings.batch_size, shuffle=True,
                          num_workers=self.settings.num_workers, **self.settings.loader_kwargs)
