"""ukjax: differentiable, batched simulation of constrained mechanical systems with the
Udwadia-Kalaba equation, in JAX.

The public API:

- :func:`udwadia_kalaba`, :func:`constraint_forces`: the UK equation for one state.
- :func:`weighted_pinv`: the M-weighted Moore-Penrose inverse $A_M^+$.
- :class:`System`: subclass it to describe a mechanical system.
- :func:`constraint_matrices`, :func:`mass_and_force`, :func:`acceleration`,
  :func:`energy`, :func:`kinetic_energy`: the model at one state.
- :func:`simulate`, :class:`Solution`: integrate with diffrax.
- :func:`sweep`, :func:`load_sweep`: chunked, sharded, resumable batched sweeps.
- :func:`constraint_residuals`, :func:`project_initial_conditions`: consistency.
- :mod:`ukjax.systems`: ready-made seed systems.
"""

import importlib.metadata

from . import systems as systems
from ._constraints import constraint_matrices as constraint_matrices
from ._diagnostics import Diagnostics as Diagnostics, diagnostics as diagnostics
from ._dynamics import (
    acceleration as acceleration,
    energy as energy,
    kinetic_energy as kinetic_energy,
    mass_and_force as mass_and_force,
)
from ._fit import (
    FitResult as FitResult,
    TrajectoryData as TrajectoryData,
    fit as fit,
    predict as predict,
    trajectory_loss as trajectory_loss,
)
from ._initial import (
    ConstraintResiduals as ConstraintResiduals,
    constraint_residuals as constraint_residuals,
    project_initial_conditions as project_initial_conditions,
)
from ._linalg import weighted_pinv as weighted_pinv
from ._simulate import Solution as Solution, simulate as simulate
from ._stabilization import (
    Baumgarte as Baumgarte,
    KuttaMerson as KuttaMerson,
    RK4 as RK4,
    Projection as Projection,
)
from ._sweep import SweepResult as SweepResult, load_sweep as load_sweep, sweep as sweep
from ._system import System as System
from ._uk import (
    UKTerms as UKTerms,
    constraint_forces as constraint_forces,
    udwadia_kalaba as udwadia_kalaba,
    uk_terms as uk_terms,
)


try:
    __version__ = importlib.metadata.version("ukjax")
except importlib.metadata.PackageNotFoundError:  # running from a source tree
    __version__ = "0.0.0+unknown"
