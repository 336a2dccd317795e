"""Ready-made systems from the literature (parameters as fields, the papers' values as
defaults; see the references in :mod:`ukjax`)."""

from ._actuated import CartPendulum as CartPendulum
from ._actuated import TwoLinkArm as TwoLinkArm
from ._appell_hamel import (
    AppellHamelWheel as AppellHamelWheel,
)
from ._appell_hamel import (
    AppellHamelWheelNonlinear as AppellHamelWheelNonlinear,
)
from ._bajodah import (
    ConeSurfaceParticle as ConeSurfaceParticle,
)
from ._bajodah import (
    NonholonomicParticle as NonholonomicParticle,
)
from ._contact_systems import BouncingBall as BouncingBall
from ._contact_systems import DiscBar as DiscBar
from ._contact_systems import ImpulsiveFourBar as ImpulsiveFourBar
from ._duffing import DuffingOscillator as DuffingOscillator
from ._friction_systems import FrictionBlock as FrictionBlock
from ._friction_systems import TwoBlockFriction as TwoBlockFriction
from ._linkages import FourBarLinkage as FourBarLinkage
from ._mbs_benchmarks import Bricard as Bricard
from ._mbs_benchmarks import NFourBar as NFourBar
from ._particles import (
    CoulombBead as CoulombBead,
)
from ._particles import (
    EllipseSpringParticle as EllipseSpringParticle,
)
from ._particles import (
    ParticleOnLine as ParticleOnLine,
)
from ._particles import (
    ParticleOnSphere as ParticleOnSphere,
)
from ._particles import (
    ParticlePfaffY as ParticlePfaffY,
)
from ._particles import (
    ParticlePfaffZ as ParticlePfaffZ,
)
from ._particles import (
    ParticleXZ2Y as ParticleXZ2Y,
)
from ._particles import (
    PointParticle as PointParticle,
)
from ._particles import (
    holonomicity as holonomicity,
)
from ._pendulums import (
    CartesianPendulum as CartesianPendulum,
)
from ._pendulums import (
    DoubleRodPendulum as DoubleRodPendulum,
)
from ._pendulums import (
    PlanarChain as PlanarChain,
)
from ._pendulums import (
    SimplePendulum as SimplePendulum,
)
from ._polar import (
    AbstractPolarMetric as AbstractPolarMetric,
)
from ._polar import (
    LagrangianMetric as LagrangianMetric,
)
from ._polar import (
    LogSpiralParticle as LogSpiralParticle,
)
from ._polar import (
    PolarProjectile as PolarProjectile,
)
from ._polar import (
    UnitMetric as UnitMetric,
)
from ._spheres import BallsOnTable as BallsOnTable
from ._swarm import SwarmRobots as SwarmRobots
from ._varying_length_pendulum import VaryingLengthPendulum as VaryingLengthPendulum
