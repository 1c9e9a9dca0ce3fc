"""The language-model families, one torch-only ``nn.Module`` file each."""
