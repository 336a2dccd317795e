"""Animations of rigid-body runs: each geom drawn in its pose, frame by frame, to a GIF
(matplotlib's 3-D axes and its Pillow writer; `pip install "ukjax[plot]"`).

Example:
    >>> import os, tempfile, jax.numpy as jnp, ukjax
    >>> ball = ukjax.from_mjcf('<mujoco><worldbody><body><freejoint/>'
    ...                        '<geom type="sphere" size="0.1"/></body></worldbody></mujoco>')
    >>> q = jnp.stack([ball.qpos0 + jnp.array([0, 0, -0.1 * k, 0, 0, 0, 0]) for k in range(3)])
    >>> path = ball.animate(q, os.path.join(tempfile.mkdtemp(), "fall.gif"))
    >>> os.path.getsize(path) > 0
    True
"""

from __future__ import annotations

import jax
import numpy as np

from ._quaternion import matrix


_PLANE, _SPHERE, _CAPSULE, _ELLIPSOID, _CYLINDER, _BOX = 0, 2, 3, 4, 5, 6


def _segments(kind: int, size, pos, rot) -> list[np.ndarray]:
    """Polylines (k, 3) that outline one geom in the world frame."""
    R = np.asarray(matrix(rot))
    if kind in (_SPHERE, _ELLIPSOID):
        t = np.linspace(0, 2 * np.pi, 25)
        radii = np.broadcast_to(size if kind == _ELLIPSOID else size[:1], (3,))
        circles = []
        for a, b in ((0, 1), (1, 2), (0, 2)):
            local = np.zeros((t.size, 3))
            local[:, a], local[:, b] = radii[a] * np.cos(t), radii[b] * np.sin(t)
            circles.append(pos + local @ R.T)
        return circles
    if kind in (_CAPSULE, _CYLINDER):
        axis = R[:, 2] * size[1]
        return [np.stack([pos - axis, pos + axis])]
    if kind == _BOX:
        corners = np.array(np.meshgrid(*[[-1.0, 1.0]] * 3, indexing="ij")).reshape(3, -1).T
        edges = [
            (i, j)
            for i in range(8)
            for j in range(i + 1, 8)
            if np.sum(corners[i] != corners[j]) == 1
        ]
        world = pos + (corners * size) @ R.T
        return [world[[i, j]] for i, j in edges]
    if kind == _PLANE:
        half = np.where(size[:2] > 0, size[:2], 1.0)
        square = np.array([[-1, -1, 0], [1, -1, 0], [1, 1, 0], [-1, 1, 0], [-1, -1, 0]]) * [
            *half,
            0,
        ]
        return [pos + square @ R.T]
    return []


def animate(model, q, path, *, ts=None, fps: int = 30, every: int = 1) -> str:
    """Save a GIF of `model` (a :class:`ukjax.RigidModel`) at the configurations `q`
    (T, nq), every `every`-th frame at `fps` frames per second, with the time in the title
    when `ts` (T,) is given. Capsules and cylinders are drawn as their axes, spheres and
    ellipsoids as three great circles, boxes as their edges, planes as a square. Returns
    `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation, PillowWriter

    q = np.asarray(q)[::every]
    times = None if ts is None else np.asarray(ts)[::every]
    positions, rotations = jax.jit(jax.vmap(model.geom_poses))(q)
    positions, rotations = np.asarray(positions), np.asarray(rotations)
    sizes = np.asarray(model.geom_size)
    moving = [g for g, kind in enumerate(model.geom_type) if kind != _PLANE]
    points = positions[:, moving].reshape(-1, 3) if moving else np.zeros((1, 3))
    centre = 0.5 * (points.min(0) + points.max(0))
    reach = 0.6 * float(np.max(points.max(0) - points.min(0))) + 0.3
    fig = plt.figure(figsize=(5, 5))
    ax = fig.add_subplot(projection="3d")

    def draw(frame):
        ax.cla()
        for g, kind in enumerate(model.geom_type):
            for line in _segments(kind, sizes[g], positions[frame, g], rotations[frame, g]):
                width = 4 if kind in (_CAPSULE, _CYLINDER) else 1
                ax.plot(*line.T, color="grey" if kind == _PLANE else f"C{g % 10}", lw=width)
        ax.set(xlim=centre[0] + [-reach, reach], ylim=centre[1] + [-reach, reach])
        ax.set(zlim=centre[2] + [-reach, reach], xlabel="x", ylabel="y", zlabel="z")
        if times is not None:
            ax.set_title(f"t = {times[frame]:.3f} s")

    animation = FuncAnimation(fig, draw, frames=len(q))
    animation.save(path, writer=PillowWriter(fps=fps))
    plt.close(fig)
    return str(path)
