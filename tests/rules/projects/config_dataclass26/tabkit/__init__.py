from .settings import LoaderSettings, OptimSettings
