"""Pure scheduling: fairshare division, KAI-order allocation, the CP-SAT model."""
