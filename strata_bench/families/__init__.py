"""Built-in kernel families; each module registers its Family subclass on import."""
