from .base import BaseTrainer
