"""What one task of a study does: a pretraining stage, a finetune cell, a baseline or a linear probe."""
