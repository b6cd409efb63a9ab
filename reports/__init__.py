"""Run directory(ies) → one self-contained report.html. Reads run directories; imports nothing from provisioning."""
