"""The emulator's patches to moto (and one to werkzeug), one module per patch.

Each module's docstring has the same four parts:

- **moto's behaviour**: what moto does wrong or slowly, and the moto (or werkzeug) file and function the
  patch replaces;
- **AWS's behaviour**: what the patch restores, with the AWS documentation; a patch for speed alone says
  so and names what it keeps;
- **upstream**: whether the change is worth sending to moto, and why; those that are have their issue
  written up in ``docs/upstream/<module>.md``;
- **patches**: the package versions whose internals it touches, also as the module's ``PATCHES`` dict,
  which ``emulator.moto_patches.check_patched_versions`` reads to name the modules to re-check when a
  package moves.

Each module's ``install()`` applies the patch and returns a function that removes it (tests run moto
with and without it). ``emulator.moto_patches.install_for_server`` applies them all, in its order.
"""
