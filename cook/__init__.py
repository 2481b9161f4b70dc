"""cook: offline multimodal SFT data pipeline."""

__version__ = "0.1.0"
