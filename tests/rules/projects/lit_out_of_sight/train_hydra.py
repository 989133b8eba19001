"""The Trainer is built from the Hydra config: its precision and benchmark are there."""
import hydra

from tasks.segment import SegmentTask


@hydra.main(config_path="configs", config_name="train", version_base=None)
def main(cfg):
    model = SegmentTask(classes=cfg.classes)
    trainer = hydra.utils.instantiate(cfg.trainer)
    trainer.fit(model, datamodule=hydra.utils.instantiate(cfg.data))


if __name__ == "__main__":
    main()
