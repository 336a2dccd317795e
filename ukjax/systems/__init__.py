"""Ready-made systems from the seed documents (parameters as fields, seed values as defaults)."""

from ._duffing import DuffingOscillator as DuffingOscillator
from ._pendulums import (
    CartesianPendulum as CartesianPendulum,
    DoubleRodPendulum as DoubleRodPendulum,
    PlanarChain as PlanarChain,
    SimplePendulum as SimplePendulum,
)
from ._swarm import SwarmRobots as SwarmRobots
from ._varying_length_pendulum import VaryingLengthPendulum as VaryingLengthPendulum
from ._polar import LogSpiralParticle as LogSpiralParticle, PolarProjectile as PolarProjectile
from ._bajodah import (
    ConeSurfaceParticle as ConeSurfaceParticle,
    NonholonomicParticle as NonholonomicParticle,
)
from ._particles import (
    CoulombBead as CoulombBead,
    EllipseSpringParticle as EllipseSpringParticle,
    PointParticle as PointParticle,
    holonomicity as holonomicity,
)
from ._appell_hamel import AppellHamelWheel as AppellHamelWheel
from ._linkages import FourBarLinkage as FourBarLinkage
