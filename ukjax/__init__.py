"""ukjax: differentiable, batched simulation of constrained mechanical systems with the
Udwadia-Kalaba equation, in JAX.

The public API:

- :func:`udwadia_kalaba`, :func:`constraint_forces`, :func:`uk_terms`: the UK equation
  for one state; :func:`weighted_pinv`: the M-weighted Moore-Penrose inverse $A_M^+$.
- UK solver strategies: :class:`Regularized` (default), :class:`CholeskyWithFallback`,
  :class:`SVD`, :class:`Cholesky`; kernel backends :class:`AutoKernels` (default),
  :class:`UnrolledKernels`, :class:`LapackKernels`,
  :class:`StructuredKernels`.
- :class:`System`: subclass it to describe a mechanical system.
- :func:`constraint_matrices`, :func:`mass_and_force`, :func:`acceleration`,
  :func:`energy`, :func:`kinetic_energy`: the model at one state.
- :func:`simulate`, :class:`Solution`: integrate with diffrax; :class:`ReplayAdjoint`:
  its default derivatives in every autodiff mode (the tangent sweep of the accepted
  steps, reverse mode by the batched backward replay); :class:`ReverseReplayAdjoint`:
  that replay as reverse-mode gradients only.
- Servo-constraint control: :class:`Servo`, :class:`ServoControlled`, :func:`controls`,
  :func:`servo_history` (plants declare `System.actuators`).
- Contact laws for unilateral constraints: :class:`Impact`, :class:`ContactDynamics`,
  :class:`HuntCrossley` (base :class:`AbstractContact`); :func:`contact_forces`, :class:`EventLog`,
  :class:`EventKind`, :data:`EVENT_KINDS`; impulses: :func:`apply_impulse`, :class:`Impulses`.
- Coulomb friction on contacts (systems declare `System.friction`): :class:`Coulomb`
  (exact stick-slip), :class:`VelocityTolerance` (Bajodah 2003's rule), base
  :class:`AbstractFriction`; :func:`friction_forces`.
- Stabilisation strategies: :class:`Baumgarte`, :class:`Projection`,
  :class:`NoStabilization` (base :class:`AbstractStabilization`).
- Initial-condition policies: :class:`CheckInitial` (default), :class:`ProjectInitial`,
  :class:`IgnoreInitial`; :func:`constraint_residuals`, :func:`project_initial_conditions`.
- :func:`diagnostics`: residuals, energy and constraint forces along a solution;
  :func:`structure_report` (:class:`StructureReport`): whether the UK solve runs on the
  sparsity found from the system's program, and why.
- :func:`sweep`, :func:`load_sweep`, :func:`sweep_status`: chunked, sharded, resumable
  batched sweeps, on this machine or handed to a distributed executor (Dask, a process
  pool, Ray, submitit) or split among workers without a coordinator (SLURM job arrays).
- :func:`fit`, :class:`TrajectoryData`, :func:`trajectory_loss`, :func:`predict`:
  identification and control with optax.
- :class:`KuttaMerson`, :class:`RK4`: fixed-step Runge-Kutta methods as diffrax solvers;
  :class:`Unrolled`, :class:`StageLoop`: an explicit Runge-Kutta solver with its stages
  written out, or in a loop of sums (faster under `jax.vmap`; :func:`sweep` picks one by
  itself).
- Rigid bodies in 3-D: :class:`RigidModel` (a tree of bodies and joints with exact loop
  closures, joint limits and contacts, in MuJoCo's joint coordinates), read from files by
  :func:`from_mjcf`, :func:`from_urdf`, or from a compiled MuJoCo model by
  :func:`from_mujoco`.
- :mod:`ukjax.systems`: ready-made systems from the literature.
- :func:`compiler_options`: the XLA options ukjax compiles its batched programs with (pass
  them to your own `jax.jit` around a large `jax.vmap(simulate)` on a CPU).

References (cited by short name in the docstrings):

- Udwadia and Kalaba 1992: F. E. Udwadia, R. E. Kalaba, *A new perspective on
  constrained motion*, Proc. R. Soc. Lond. A 439 (1992) 407-410.
- Udwadia 2004: F. E. Udwadia, *On constrained motion*, Appl. Math. Comput. (2004/2005).
- Zhao et al. 2018: X.-M. Zhao, Y.-H. Chen, H. Zhao, F.-F. Dong, *Udwadia-Kalaba
  equation for constrained mechanical systems: formulation and applications*, Chin. J.
  Mech. Eng. 31 (2018).
- Bajodah 2003: A. H. Bajodah, *Acceleration Constraints in Modeling and Control of
  Nonholonomic Systems*, PhD thesis, Georgia Institute of Technology (2003).
- Pamplona 2021: J. F. Pamplona, *Udwadia-Kalaba Method for Obtaining the Dynamics of
  Constrained Systems*, graduation project (2021).
- *On Dynamics* 2020: lecture notes *On Dynamics* (spring 2020).
"""

from importlib import metadata as _metadata

from . import systems as systems
from ._adjoint import ReplayAdjoint as ReplayAdjoint
from ._adjoint import ReverseReplayAdjoint as ReverseReplayAdjoint
from ._constraints import constraint_matrices as constraint_matrices
from ._contact import AbstractContact as AbstractContact
from ._contact import ContactDynamics as ContactDynamics
from ._contact import HuntCrossley as HuntCrossley
from ._contact import Impact as Impact
from ._diagnostics import Diagnostics as Diagnostics
from ._diagnostics import diagnostics as diagnostics
from ._dynamics import (
    acceleration as acceleration,
)
from ._dynamics import (
    energy as energy,
)
from ._dynamics import (
    kinetic_energy as kinetic_energy,
)
from ._dynamics import (
    mass_and_force as mass_and_force,
)
from ._events import EVENT_KINDS as EVENT_KINDS
from ._events import EventKind as EventKind
from ._events import EventLog as EventLog
from ._field import contact_forces as contact_forces
from ._field import friction_forces as friction_forces
from ._fit import (
    FitResult as FitResult,
)
from ._fit import (
    TrajectoryData as TrajectoryData,
)
from ._fit import (
    fit as fit,
)
from ._fit import (
    predict as predict,
)
from ._fit import (
    trajectory_loss as trajectory_loss,
)
from ._friction import AbstractFriction as AbstractFriction
from ._friction import Coulomb as Coulomb
from ._friction import VelocityTolerance as VelocityTolerance
from ._impulse import Impulses as Impulses
from ._impulse import apply_impulse as apply_impulse
from ._initial import (
    AbstractInitialConditions as AbstractInitialConditions,
)
from ._initial import (
    CheckInitial as CheckInitial,
)
from ._initial import (
    IgnoreInitial as IgnoreInitial,
)
from ._initial import (
    ProjectInitial as ProjectInitial,
)
from ._integrators import RK4 as RK4
from ._integrators import KuttaMerson as KuttaMerson
from ._kernel_strategies import (
    AbstractKernels as AbstractKernels,
)
from ._kernel_strategies import (
    AutoKernels as AutoKernels,
)
from ._kernel_strategies import (
    LapackKernels as LapackKernels,
)
from ._kernel_strategies import (
    StructuredKernels as StructuredKernels,
)
from ._kernel_strategies import (
    UnrolledKernels as UnrolledKernels,
)
from ._linalg import weighted_pinv as weighted_pinv
from ._mjcf import from_mjcf as from_mjcf
from ._mjcf import from_mujoco as from_mujoco
from ._mjcf import from_urdf as from_urdf
from ._projection import (
    Projection as Projection,
)
from ._projection import (
    project_initial_conditions as project_initial_conditions,
)
from ._residuals import (
    ConstraintResiduals as ConstraintResiduals,
)
from ._residuals import (
    constraint_residuals as constraint_residuals,
)
from ._results import RESULTS as RESULTS
from ._rigid import RigidModel as RigidModel
from ._servo import Servo as Servo
from ._servo import ServoControlled as ServoControlled
from ._servo import ServoHistory as ServoHistory
from ._servo import controls as controls
from ._servo import servo_history as servo_history
from ._simulate import simulate as simulate
from ._solution import Solution as Solution
from ._stabilization import (
    AbstractStabilization as AbstractStabilization,
)
from ._stabilization import (
    Baumgarte as Baumgarte,
)
from ._stabilization import (
    NoStabilization as NoStabilization,
)
from ._stage_loop import StageLoop as StageLoop
from ._structure_report import StructureReport as StructureReport
from ._structure_report import structure_report as structure_report
from ._sweep import (
    RESULT_NAMES as RESULT_NAMES,
)
from ._sweep import (
    IncompleteSweepError as IncompleteSweepError,
)
from ._sweep import (
    SweepResult as SweepResult,
)
from ._sweep import (
    load_sweep as load_sweep,
)
from ._sweep import (
    sweep as sweep,
)
from ._sweep_store import (
    SweepStatus as SweepStatus,
)
from ._sweep_store import (
    sweep_status as sweep_status,
)
from ._system import System as System
from ._uk import (
    UKTerms as UKTerms,
)
from ._uk import (
    constraint_forces as constraint_forces,
)
from ._uk import (
    udwadia_kalaba as udwadia_kalaba,
)
from ._uk import (
    uk_terms as uk_terms,
)
from ._uk_solvers import (
    SVD as SVD,
)
from ._uk_solvers import (
    AbstractUKSolver as AbstractUKSolver,
)
from ._uk_solvers import (
    Cholesky as Cholesky,
)
from ._uk_solvers import (
    CholeskyWithFallback as CholeskyWithFallback,
)
from ._uk_solvers import (
    Regularized as Regularized,
)
from ._unrolled import Unrolled as Unrolled
from ._xla import compiler_options as compiler_options


try:
    __version__ = _metadata.version("ukjax")
except _metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+unknown"
