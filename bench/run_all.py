"""Run every benchmark in bench/ and print its figures."""
import os
import runpy
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHES = ["mlp_grad.py", "wave.py", "hvp.py", "per_example.py", "jit.py", "ckernels.py",
           "first_call.py",
           "sharding.py"]

if __name__ == "__main__":
    sys.path.insert(0, HERE)
    for name in BENCHES:
        print(f"\n=== bench/{name} ===")
        runpy.run_path(os.path.join(HERE, name), run_name="__main__")
