"""The embedded sandbox: emulator, local glue and fakes of external systems."""
