"""What the commands print: human output (rich) and JSON documents, one module per subject."""
