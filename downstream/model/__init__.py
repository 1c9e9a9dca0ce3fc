"""The pair classifier as torch modules: layer mixes, pair heads, standardisation, the settings that pick them."""
