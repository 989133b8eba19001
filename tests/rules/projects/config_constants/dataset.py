import cv2
import torch


class ImageCaptions(torch.utils.data.Dataset):
    def __init__(self, frame, mode):
        self.paths, self.captions, self.mode = list(frame["image"]), list(frame["caption"]), mode

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        image = cv2.imread(self.paths[i])
        return {"x": torch.tensor(image).float(), "caption": self.captions[i]}
