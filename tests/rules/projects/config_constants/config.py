import torch
batch_size = 32
num_workers = 0
device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
