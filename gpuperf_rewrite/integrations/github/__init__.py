"""The GitHub pull-request bot."""
