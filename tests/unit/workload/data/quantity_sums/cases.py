import json
import random

random.seed(15)
atoms = [
    "0",
    "1",
    "2",
    "500m",
    "100m",
    "1500m",
    "0.5",
    "1.5",
    "250m",
    "1k",
    "1M",
    "1G",
    "1T",
    "1P",
    "1E",
    "1000E",
    "12E",
    "1Ki",
    "512Mi",
    "1Gi",
    "1.5Gi",
    "0.5Gi",
    "1023",
    "1024",
    "1025",
    "2048Ki",
    "1Mi",
    "3Mi",
    "7Ei",
    "8Ei",
    "16Ei",
    "1e3",
    "1E3",
    "2e-3",
    "1.5e2",
    "1e0",
    "100u",
    "5n",
    "1.0000000001",
    "0.0000000001",
    "123456789012345678901",
    "100",
    "4",
    "8",
    "16Gi",
    "64Gi",
    "80Gi",
    "0.1",
    "0.1Ki",
    "1.3Ki",
    "10Mi",
    "1000Mi",
    "1000000",
    "1e9",
    "+1",
    "1.",
    ".5",
    "0Gi",
    "0m",
    "2000m",
    "4000Mi",
    "999",
    "1000",
    "1001m",
    "100000000000000000",
]
cases = [[[a, 1]] for a in atoms]
for a in atoms:
    for n in (0, 2, 3, 1024):
        cases.append([[a, n]])
for _ in range(600):
    k = random.randint(2, 5)
    cases.append(
        [[random.choice(atoms), random.choice([0, 1, 1, 2, 3, 4, 8, 1000])] for _ in range(k)]
    )
print("\n".join(json.dumps(c) for c in cases))
