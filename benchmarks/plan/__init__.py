"""What a benchmark matrix asks for: its typed settings, the cells and encoders it plans, and how long they take."""
