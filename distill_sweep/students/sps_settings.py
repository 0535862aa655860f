"""student=sps, PEA-KD's SPS-1 (Shuffled Parameter Sharing, step 1): the teacher's class and width with
`num_layers` parameter layers, whose top `shared_layers` run a second time after all of them (3 + 3 = 6
positions: [1,2,3,1',2',3']). `init` names one teacher layer per position; the parameter layers are copied from
the first num_layers of them (init=bottom: teacher layers 1..3, the paper's student). The paper's 6-layer student
shares its top 3: num_layers=6 shared_layers=3. SPS-2 (swap_qk) is the preset conf/student/sps2.yaml. Its code:
students/sps.py.

Torch-free: the type's settings (their defaults' one home) and its declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from distill_sweep.config.parse import IDENTITY
from distill_sweep.errors import ConfigError

from .base import StudentType, register_student


@dataclass
class SPSSettings:
    name: str = field(default="sps", metadata=IDENTITY)  # the student type
    num_layers: int = field(default=3, metadata=IDENTITY | {"ge": 1})  # parameter layers k
    shared_layers: int | None = field(default=3, metadata=IDENTITY)  # s: the top s layers run again after all k (null: all k, 2k positions)
    swap_qk: bool = field(default=False, metadata=IDENTITY)  # SPS-2: the upper copies swap their Query and Key parameters

    @property
    def shared(self) -> int:
        return self.num_layers if self.shared_layers is None else self.shared_layers

    def validate(self, where: str) -> None:
        if not 1 <= self.shared <= self.num_layers:  # the odd split: nothing to share, or more than there is
            raise ConfigError(f"{where}.shared_layers={self.shared_layers}: must be 1..{where}.num_layers="
                              f"{self.num_layers} (the top s of the student's layers run a second time)")


register_student(StudentType("sps", SPSSettings, "distill_sweep.students.sps",
                             uses_init=True, needs_teacher_weights=True))
