r"""Quaternion algebra in `jax.numpy`, scalar first ($p = (w, x, y, z)$, MuJoCo's order).

The rotation of a unit quaternion $p = (w, u)$ is
$R(p)v = v + 2w\,u\times v + 2u\times(u\times v)$; a body's angular velocity in its own
frame is $\omega = 2\,\mathrm{vec}(\bar p\otimes\dot p)$ and in the world frame
$2\,\mathrm{vec}(\dot p\otimes\bar p)$ (Udwadia and Schutte, *An alternative derivation of
the quaternion equations of motion for rigid-body rotational dynamics*, J. Appl. Mech. 77
(2010) 044505, eq. 5). Nothing here normalises: the rigid-body models keep $|p| = 1$ as a
constraint, and off it these formulas are smooth extensions.

Example:
    >>> import jax.numpy as jnp
    >>> from ukjax import _quaternion as quat
    >>> p = quat.from_axis_angle(jnp.array([0.0, 0.0, 1.0]), jnp.pi / 2)  # 90 deg about z
    >>> [round(float(v), 6) + 0.0 for v in quat.rotate(p, jnp.array([1.0, 0.0, 0.0]))]
    [0.0, 1.0, 0.0]
"""

from __future__ import annotations

import jax.numpy as jnp
import numpy as np

from ._shared_trig import shared_cos, shared_sin


def _product_tensor() -> np.ndarray:
    """C (4, 4, 4) with (a ⊗ b)_i = C_ijk a_j b_k."""
    C = np.zeros((4, 4, 4))
    table = [  # (i, j, k, sign): the terms of the Hamilton product
        (0, 0, 0, 1), (0, 1, 1, -1), (0, 2, 2, -1), (0, 3, 3, -1),
        (1, 0, 1, 1), (1, 1, 0, 1), (1, 2, 3, 1), (1, 3, 2, -1),
        (2, 0, 2, 1), (2, 1, 3, -1), (2, 2, 0, 1), (2, 3, 1, 1),
        (3, 0, 3, 1), (3, 1, 2, 1), (3, 2, 1, -1), (3, 3, 0, 1),
    ]  # fmt: skip
    for i, j, k, sign in table:
        C[i, j, k] = sign
    return C


_PRODUCT = _product_tensor()
_CONJUGATE = np.array([1.0, -1.0, -1.0, -1.0])
# R(p)v = vec(p ⊗ (0, v) ⊗ p̄) = D_ijkl p_j v_k p_l
_ROTATION = np.einsum("inl,l,njm,mk->ijkl", _PRODUCT[1:], _CONJUGATE, _PRODUCT, np.eye(4)[:, 1:])
# R(p)_ik = D_ijkl... rearranged as a quadratic form in p: R_ik = Q_ikjl p_j p_l
_QUADRATIC = np.einsum("ijkl->ikjl", _ROTATION)


def _constant(x, like):
    return jnp.asarray(x, jnp.result_type(like))


# The products and rotations used in chains of frames (the kinematics) are contractions
# with constant tensors: two or three XLA operations each instead of dozens of scalar ones,
# which keeps the programs of deep trees small (their compile time follows the number of
# operations) and gives XLA no elementwise chain to fuse and recompute. `cross` and
# `rotate_unit`, for the shallow uses, are written out.


def multiply(a, b):
    """The Hamilton product a ⊗ b of quaternions (..., 4)."""
    return jnp.einsum("ijk,...j,...k->...i", _constant(_PRODUCT, a), a, b)


def conjugate(p):
    """$\\bar p = (w, -u)$."""
    return p * _constant(_CONJUGATE, p)


def rotate(p, v):
    r"""$R(p)v$ for a unit quaternion p (..., 4) and vectors v (..., 3)."""
    return jnp.einsum("...ij,...j->...i", rotation_matrix(p), v)


def rotation_matrix(p):
    r"""$R(p)$ (..., 3, 3): the quadratic form $R_{ij} = D_{ijkl}p_kp_l$, one contraction of
    the outer product $pp^T$ (a tenth of the multiplications of contracting $D$ with p
    first, and no elementwise chain for XLA to fuse and recompute)."""
    outer = p[..., :, None] * p[..., None, :]
    return jnp.einsum("ijkl,...kl->...ij", _constant(_QUADRATIC, p), outer)


def cross(a, b):
    """The cross product a x b of vectors (..., 3), written out: three multiply-adds per
    component over whole arrays (a contraction with the Levi-Civita tensor costs 36
    multiplications, and XLA runs it as a batched matrix product). For the shallow uses
    (Jacobians, bias and gyroscopic terms); the deep chains of the kinematics use
    :func:`rotate` and :func:`multiply`."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return jnp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


def rotate_unit(p, v):
    r"""$R(p)v = v + 2w\,u\times v + 2u\times(u\times v)$ for unit quaternions p (..., 4)
    and vectors v (..., 3), written out: for whole arrays of rotations whose quaternions
    are unit by construction (products of unit quaternions, as in a tree of hinges), at a
    fraction of :func:`rotate`'s multiplications; off the unit sphere it is not
    :func:`rotate`'s extension. In a chain of frames (forward kinematics) use
    :func:`rotate`: XLA fuses long elementwise chains by recomputing shared terms,
    exponentially in the depth."""
    w, u = p[..., :1], p[..., 1:]
    t = 2.0 * cross(u, v)
    return v + w * t + cross(u, t)


def from_axis_angle(axis, angle):
    """The unit quaternion of a rotation by `angle` about the unit vector `axis` (3,)."""
    half = 0.5 * angle
    return jnp.concatenate([shared_cos(half)[None], shared_sin(half) * axis])


def body_rate(p, pd):
    r"""Angular velocity in the body frame, $2\,\mathrm{vec}(\bar p\otimes\dot p)$."""
    return 2.0 * multiply(conjugate(p), pd)[..., 1:]


def world_rate(p, pd):
    r"""Angular velocity in the world frame, $2\,\mathrm{vec}(\dot p\otimes\bar p)$."""
    return 2.0 * multiply(pd, conjugate(p))[..., 1:]


def rate_from_body(p, omega):
    r"""$\dot p = \tfrac12 p\otimes(0, \omega)$ for a body-frame angular velocity."""
    zero = jnp.zeros(omega.shape[:-1] + (1,), omega.dtype)
    return 0.5 * multiply(p, jnp.concatenate([zero, omega], axis=-1))


def matrix(p):
    """The rotation matrix R(p) (3, 3) of a unit quaternion."""
    return rotate(p[None], jnp.eye(3, dtype=p.dtype)).T
