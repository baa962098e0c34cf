//! The seed's three data sets, generated on each process from a fixed seed:
//! A, random integers whose value is their target; B, 64-byte particles
//! uniformly in the unit cube, targeted by a Z-order curve over 8^6
//! sub-cubes split evenly over the processes; C, B's particles as each
//! process holds them after B, moved by at most half a sub-cube width.

use bytemuck::{Pod, Zeroable};

/// Sub-cubes per dimension: 8^6 = 64^3 in all.
const CELLS: u32 = 64;

/// Example B's particle (`particle_data_t`), padded to 64 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
#[repr(C)]
pub struct Particle {
    pub pos: [f64; 3],
    pub q: f64,
    pub vel: [f64; 3],
    pub tproc: u32,
    pad: u32,
}

/// Which data set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Set {
    A,
    B,
    C,
}

impl Set {
    pub const ALL: [Set; 3] = [Set::A, Set::B, Set::C];

    pub fn name(self) -> &'static str {
        match self {
            Set::A => "A",
            Set::B => "B",
            Set::C => "C",
        }
    }

    /// An element's bytes, and the offset of its target (a u32) in it.
    pub fn layout(self) -> (usize, usize) {
        match self {
            Set::A => (std::mem::size_of::<u32>(), 0),
            Set::B | Set::C => (
                std::mem::size_of::<Particle>(),
                std::mem::offset_of!(Particle, tproc),
            ),
        }
    }

    pub fn parse(name: &str) -> Result<Set, String> {
        Set::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| format!("no data set {name:?} (A, B or C)"))
    }
}

/// splitmix64, one stream per (seed, rank).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64, rank: u32) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (u64::from(rank) << 32 | 0xa11))
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Example A on `rank`: `n` integers in 0..size.
pub fn integers(n: usize, rank: u32, size: u32) -> Vec<u32> {
    let mut rng = Rng::new(0xa, rank);
    (0..n)
        .map(|_| (rng.next() % u64::from(size)) as u32)
        .collect()
}

/// The Z-order (Morton) number of the sub-cube holding `pos`.
fn z_order(pos: [f64; 3]) -> u32 {
    let cell = |x: f64| ((x * f64::from(CELLS)) as u32).min(CELLS - 1);
    let (x, y, z) = (cell(pos[0]), cell(pos[1]), cell(pos[2]));
    let mut code = 0;
    for bit in 0..6 {
        code |= ((x >> bit) & 1) << (3 * bit);
        code |= ((y >> bit) & 1) << (3 * bit + 1);
        code |= ((z >> bit) & 1) << (3 * bit + 2);
    }
    code
}

/// The inverse of `z_order`: the sub-cube's corner.
fn corner(code: u32) -> [f64; 3] {
    let mut c = [0u32; 3];
    for bit in 0..6 {
        for (d, cd) in c.iter_mut().enumerate() {
            *cd |= ((code >> (3 * bit + d)) & 1) << bit;
        }
    }
    c.map(|v| f64::from(v) / f64::from(CELLS))
}

const SUBCUBES: u64 = (CELLS as u64).pow(3);

/// The process owning sub-cube `code`: the curve split evenly.
fn owner(code: u32, size: u32) -> u32 {
    (u64::from(code) * u64::from(size) / SUBCUBES) as u32
}

fn particle(pos: [f64; 3], rng: &mut Rng, size: u32) -> Particle {
    Particle {
        pos,
        q: rng.unit(),
        vel: [rng.unit(), rng.unit(), rng.unit()],
        tproc: owner(z_order(pos), size),
        pad: 0,
    }
}

/// Example B on `rank`: `n` particles uniformly in the unit cube.
pub fn particles(n: usize, rank: u32, size: u32) -> Vec<Particle> {
    let mut rng = Rng::new(0xb, rank);
    (0..n)
        .map(|_| {
            let pos = [rng.unit(), rng.unit(), rng.unit()];
            particle(pos, &mut rng, size)
        })
        .collect()
}

/// Example C on `rank`: `n` particles in `rank`'s own sub-cubes (as B
/// leaves them), each then moved by up to half a sub-cube width per
/// dimension (kept inside the cube) and retargeted.
pub fn moved(n: usize, rank: u32, size: u32) -> Vec<Particle> {
    let mut rng = Rng::new(0xc, rank);
    // The sub-cubes `rank` owns: codes with owner == rank.
    let first = (u64::from(rank) * SUBCUBES).div_ceil(u64::from(size));
    let end = (u64::from(rank + 1) * SUBCUBES).div_ceil(u64::from(size));
    let width = 1.0 / f64::from(CELLS);
    (0..n)
        .map(|_| {
            let code = (first + rng.next() % (end - first).max(1)) as u32;
            let c = corner(code);
            let pos = [0, 1, 2].map(|d| {
                let inside = c[d] + rng.unit() * width;
                let step = (rng.unit() - 0.5) * width;
                (inside + step).clamp(0.0, 1.0 - f64::EPSILON)
            });
            particle(pos, &mut rng, size)
        })
        .collect()
}

/// The processes a particle of `rank` can reach in one step of C (half a
/// sub-cube): the owners of the sub-cubes next to its own (26 around
/// each), itself included. Symmetric, so it lists sources and targets.
pub fn neighbourhood(rank: u32, size: u32) -> Vec<u32> {
    let first = (u64::from(rank) * SUBCUBES).div_ceil(u64::from(size));
    let end = (u64::from(rank + 1) * SUBCUBES).div_ceil(u64::from(size));
    let mut around = vec![rank];
    for code in first..end {
        let c = corner(code as u32).map(|v| (v * f64::from(CELLS)).round() as i64);
        for d in 0..27 {
            let step = [d % 3, d / 3 % 3, d / 9].map(|s| s as i64 - 1);
            let cell = [0, 1, 2].map(|i| c[i] + step[i]);
            if cell.iter().all(|&v| (0..i64::from(CELLS)).contains(&v)) {
                let centre = cell.map(|v| (v as f64 + 0.5) / f64::from(CELLS));
                around.push(owner(z_order(centre), size));
            }
        }
        around.sort_unstable();
        around.dedup();
    }
    around
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_curve_is_one_to_one_and_split_evenly() {
        for code in [0, 1, 7, 8, 4095, 262_143] {
            let c = corner(code);
            let centre = c.map(|v| v + 0.5 / f64::from(CELLS));
            assert_eq!(z_order(centre), code);
        }
        assert_eq!(owner(0, 16), 0);
        assert_eq!(owner(262_143, 16), 15);
        assert_eq!(owner(262_144 / 16, 16), 1);
    }

    #[test]
    fn c_moves_a_few_percent_to_neighbours() {
        let size = 16;
        let ps = moved(10_000, 5, size);
        let away = ps.iter().filter(|p| p.tproc != 5).count();
        assert!((100..3_000).contains(&away), "{away} of 10000 move");
        assert!(ps.iter().all(|p| p.tproc < size));
        assert_eq!(std::mem::size_of::<Particle>(), 64);
        let near = neighbourhood(5, size);
        assert!(ps.iter().all(|p| near.binary_search(&p.tproc).is_ok()));
        for &other in &near {
            assert!(neighbourhood(other, size).contains(&5), "symmetric");
        }
    }
}
