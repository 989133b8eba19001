import torch
from torch.utils.data import DataLoader

from speechkit.evaluate import score_all
from speechkit.system import Recipe


def main(train_set, test_set, model):
    train_loader = DataLoader(train_set, batch_size=8, shuffle=True, num_workers=4, pin_memory=True)
    test_loader = DataLoader(test_set, batch_size=8, num_workers=4, pin_memory=True)
    opt = torch.optim.Adam(model.parameters(), fused=True)
    Recipe(model.cuda(), opt, train_loader=train_loader).fit(100)
    print(score_all(model, test_loader))


if __name__ == "__main__":
    main(None, None, None)
